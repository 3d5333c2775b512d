"""nki.builtin: the builtins namespace NKI's CPU simulator installs for kernels
(``builtins.builtin``). nkisim's kernels need none, so this module only holds the public API it
re-exports: nl and nisa."""
from nki import isa, language  # noqa: F401
