//! Python's `repr()` and `str()` of the values our messages show, so native error messages read
//! exactly like the Python ones (`b'q:'`, `{'row': 'a', 'cf': 1}`, `1e-05`).
//!
//! Python prints printable non-ASCII characters as they are and escapes the rest, which depends on
//! its Unicode database. We do not copy that table: [`str_repr`] returns `None` for non-ASCII text,
//! and callers hand such (rare, error-path) cases back to Python.

use serde_json::Value;

/// `repr(bytes)`.
pub fn bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::with_capacity(b.len() + 3);
    out.push('b');
    out.push(quote as char);
    for &c in b {
        push_escaped(&mut out, c, quote);
    }
    out.push(quote as char);
    out
}

fn push_escaped(out: &mut String, c: u8, quote: u8) {
    match c {
        b'\\' => out.push_str("\\\\"),
        b'\t' => out.push_str("\\t"),
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        _ if c == quote => {
            out.push('\\');
            out.push(c as char);
        }
        0x20..=0x7e => out.push(c as char),
        _ => out.push_str(&format!("\\x{c:02x}")),
    }
}

/// `repr(str)` for ASCII text; `None` when the text has non-ASCII characters (see module doc).
pub fn str_repr(s: &str) -> Option<String> {
    if !s.is_ascii() {
        return None;
    }
    let b = s.as_bytes();
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::with_capacity(b.len() + 2);
    out.push(quote as char);
    for &c in b {
        push_escaped(&mut out, c, quote);
    }
    out.push(quote as char);
    Some(out)
}

/// Python's `repr(float)` (the same as `str(float)`): shortest round-trip digits, scientific
/// notation below 1e-4 and from 1e16 on, with a two-digit signed exponent, and `.0` on integers.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits too, e.g. "-1.2345e-5"
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("{:e} always has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let (digits, exp) = half_to_even(x.abs(), digits, exp);
    let sign = if x < 0.0 { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let n = digits.len() as i32;
    if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if point >= n {
        format!("{sign}{digits}{}.0", "0".repeat((point - n) as usize))
    } else {
        let (a, b) = digits.split_at(point as usize);
        format!("{sign}{a}.{b}")
    }
}

/// When the double lies exactly halfway between two shortest digit strings, Rust's `{:e}` takes the
/// upper one and Python's repr the one whose last digit is even (562949953421312.25 prints as
/// "562949953421312.2" in Python). `digits`/`exp` are Rust's shortest digits of `x` (> 0).
fn half_to_even(x: f64, digits: String, exp: i32) -> (String, i32) {
    // every double has an exact decimal expansion of at most 767 significant digits
    let exact = format!("{x:.800e}");
    let (mantissa, exact_exp) = exact.split_once('e').expect("{:e} always has an exponent");
    let all: String = mantissa.chars().filter(|c| *c != '.').collect();
    let all = all.trim_end_matches('0');
    let n = digits.len();
    let tie = exact_exp.parse::<i32>() == Ok(exp) && all.len() == n + 1 && all.ends_with('5');
    if !tie || (all.as_bytes()[n - 1] - b'0') % 2 == 1 {
        return (digits, exp);
    }
    let lower = &all[..n];
    let text = if n == 1 {
        format!("{lower}e{exp}")
    } else {
        format!("{}.{}e{exp}", &lower[..1], &lower[1..])
    };
    if text.parse::<f64>() == Ok(x) {
        (lower.to_string(), exp)
    } else {
        (digits, exp)
    }
}

/// Python refuses to convert ints of more than this many digits to text (`sys.int_info`).
pub const INT_MAX_STR_DIGITS: usize = 4300;

/// A JSON number as Python's `str()` of what `json.loads` makes of it (int or float); `None` where
/// Python would refuse (an int too long to print).
pub fn number_str(text: &str) -> Option<String> {
    if text.contains(['.', 'e', 'E']) {
        let x: f64 = text.parse().ok()?;
        return Some(float_repr(x));
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.len() > INT_MAX_STR_DIGITS {
        return None;
    }
    // JSON forbids leading zeros, so the text is already canonical except for "-0"
    if digits == "0" {
        return Some("0".into());
    }
    Some(text.to_string())
}

/// Python truthiness of a JSON value as `json.loads` returns it.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => {
            let text = n.as_str();
            if text.contains(['.', 'e', 'E']) {
                text.parse::<f64>().map(|x| x != 0.0).unwrap_or(true)
            } else {
                text.trim_start_matches('-') != "0"
            }
        }
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// `type(value).__name__` of what `json.loads` returns.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_str().contains(['.', 'e', 'E']) => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// `repr()` of a JSON value as `json.loads` returns it; `None` where we defer to Python.
pub fn json_repr(v: &Value) -> Option<String> {
    let mut out = String::new();
    write_repr(&mut out, v)?;
    Some(out)
}

fn write_repr(out: &mut String, v: &Value) -> Option<()> {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&number_str(n.as_str())?),
        Value::String(s) => out.push_str(&str_repr(s)?),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&str_repr(k)?);
                out.push_str(": ");
                write_repr(out, item)?;
            }
            out.push('}');
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        let cases = [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (123.0, "123.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (9999999999999998.0, "9999999999999998.0"),
            (12345.678, "12345.678"),
            (562949953421312.2, "562949953421312.2"), // a tie: Python takes the even digit
            (0.125, "0.125"),
            (2.5e-5, "2.5e-05"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }

    #[test]
    fn bytes_and_str_repr_pick_quotes_like_python() {
        assert_eq!(bytes_repr(b"q:"), "b'q:'");
        assert_eq!(bytes_repr(b"it's"), "b\"it's\"");
        assert_eq!(bytes_repr(b"'\""), "b'\\'\"'");
        assert_eq!(bytes_repr(b"\x00\xff\\\n"), "b'\\x00\\xff\\\\\\n'");
        assert_eq!(str_repr("a\x7f").unwrap(), "'a\\x7f'");
        assert_eq!(str_repr("é"), None);
    }

    #[test]
    fn numbers_as_python_str() {
        assert_eq!(number_str("-0").unwrap(), "0");
        assert_eq!(number_str("1E5").unwrap(), "100000.0");
        assert_eq!(number_str("1e400").unwrap(), "inf");
        assert_eq!(number_str(&"9".repeat(4301)), None);
    }
}
