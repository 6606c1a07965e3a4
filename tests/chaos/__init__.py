"""The chaos suite: member processes behind fault-injecting proxies (``make chaos``)."""
