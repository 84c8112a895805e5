//! Fossilize databases: reading them and replaying their pipelines.
