"""TEST-ONLY: a MetricsContext that stores what is put in it and sends nothing anywhere."""


class MetricsContext:
    def __init__(self):
        self.namespace = "nkisim-test-only"
        self.properties = {}
        self.dimensions = []
        self.metrics = {}
        self.meta = {}

    @staticmethod
    def empty():
        return MetricsContext()

    def put_metric(self, key, value, unit=None, storage_resolution=60):
        self.metrics.setdefault(key, []).append((value, unit))

    def set_property(self, key, value):
        self.properties[key] = value

    def put_dimensions(self, dims):
        self.dimensions.append(dims)

    def set_dimensions(self, dims, use_default=False):
        self.dimensions = list(dims)

    def set_namespace(self, namespace):
        self.namespace = namespace

    def create_copy_with_context(self, preserve_dimensions=False):
        return MetricsContext()
