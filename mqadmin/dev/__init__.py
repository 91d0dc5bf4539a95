"""The local development cluster of ``mqadmin dev``: processes, configs and demo traffic."""
