"""TEST-ONLY stand-in for plotext (terminal plots; not packaged by Debian): the NKI library's
tensor histograms draw with it; here every call does nothing and build() returns a note."""


def _nothing(*args, **kwargs):
    return None


clf = hist = plotsize = ylim = vline = title = _nothing


def build():
    return "(histogram not drawn: plotext test-only stand-in)"
