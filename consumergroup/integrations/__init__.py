"""Integrations: FastAPI and aiohttp services (lifespan, health, metrics), PySpark (a Kafka source).

Each lives in its own module and imports its framework only when imported itself,
so ``import consumergroup`` never needs FastAPI, aiohttp or PySpark.
"""
