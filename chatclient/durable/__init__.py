"""Durable execution: agents workflows whose steps survive a crash (``chatclient.durable.dbos``, extra ``dbos``)."""
