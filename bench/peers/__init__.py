"""One script per benchmark peer; each runs as its own process (``python -m bench.peers.X``).

``cg_batches``, ``cg_messages``: consumergroup; ``aiokafka_getmany``: aiokafka's
``AIOKafkaConsumer``; ``confluent``: confluent-kafka (librdkafka). The stdout
protocol they share is described in :mod:`bench.peers._common`.
"""
