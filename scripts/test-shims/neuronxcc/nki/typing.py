"""TEST-ONLY: the legacy `neuronxcc.nki.typing` is nkisim's `nki.typing` (annotations only)."""
from nki.typing import *  # noqa: F401,F403
from nki.typing import mutable_tensor, scalar, tensor  # noqa: F401
