"""TEST-ONLY: serializes a MetricsContext's metrics as one JSON line each (kept local)."""
import json


class LogSerializer:
    @staticmethod
    def serialize(context):
        return [json.dumps({"metrics": {k: [v for v, _ in vals] for k, vals in
                                        context.metrics.items()},
                            "properties": context.properties}, default=str)]
