"""Benchmarks: consumergroup against aiokafka and confluent-kafka on the same broker and data.

Run ``python -m bench`` (or ``make bench``); see ``bench/README.md``. Never part of
``make test``.
"""
