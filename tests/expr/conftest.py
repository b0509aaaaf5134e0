import os

from hypothesis import HealthCheck, settings

# "ci" keeps the whole tests/expr + tests/workload run well under a minute; "thorough"
# (PANDO_HYPOTHESIS=thorough) runs many more examples.
settings.register_profile("ci", max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("PANDO_HYPOTHESIS", "ci"))
