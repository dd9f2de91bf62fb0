"""Loads the Accumulo Proxy 2.x Thrift interface at run time (no generated Python code)."""

from __future__ import annotations

from importlib import resources

import thriftpy2

IDL_PATH = str(resources.files(__package__).joinpath("proxy.thrift"))

# The module name must end in "_thrift" so thriftpy2 registers it and its structs pickle (Spark ships them).
proxy = thriftpy2.load(IDL_PATH, module_name="accumulo_proxy_thrift")

MAX_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
