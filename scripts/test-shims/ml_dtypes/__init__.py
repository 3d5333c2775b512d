"""TEST-ONLY stand-in for ml_dtypes (scripts/test-shims/README.md). numpy has no bfloat16 and a
pure-Python package cannot add one, so `bfloat16` here is a named marker, not a dtype: test
parameter lists that name it import, and a test that makes an array of it fails naming this
stand-in. The float32 cases of those tests are unaffected."""


class _Marker:
    def __init__(self, name):
        self.name = name
        self.__name__ = name

    def __repr__(self):
        return f"ml_dtypes.{self.name} (test-only marker, not a numpy dtype)"

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"ml_dtypes.{self.name}: the test-only stand-in has no numpy "
                                  "dtype (install the real ml_dtypes)")


bfloat16 = _Marker("bfloat16")
float8_e4m3fn = _Marker("float8_e4m3fn")
float8_e5m2 = _Marker("float8_e5m2")
float8_e4m3 = _Marker("float8_e4m3")
float4_e2m1fn = _Marker("float4_e2m1fn")
