"""The host BLAS settings nkisim's own command line uses (launcher/main.cc), applied before the
extension loads OpenBLAS: one thread (every BLAS call of the simulator is single-threaded; the
library's default pool spins on idle cores) and, where the user has not chosen, the kernels for
this CPU (Debian's OpenBLAS 0.3.21 falls back to slow generic ones on some newer x86 CPUs).
They take effect only if OpenBLAS is not loaded yet (e.g. by numpy); `nkisim python` sets them
before the interpreter starts."""
import os


def configure_openblas():
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if "avx512f" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif "avx2" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
