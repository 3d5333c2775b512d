"""TEST-ONLY: `fabric2` is the PyPI alias of Fabric 2, which Debian ships as `fabric`
(python3-fabric); the NKI library's host-management helpers import it under the alias."""
from fabric import *  # noqa: F401,F403
from fabric import Config, Connection  # noqa: F401
