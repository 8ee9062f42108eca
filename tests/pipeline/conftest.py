from tests.pipeline.nsq_helpers import open_reader  # noqa: F401  (fixture)
