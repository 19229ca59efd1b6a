"""Request parsing and the error answers (pure).

- :mod:`.request_json`: request bodies from bytes to JSON values
- :mod:`.validation`: the checks both endpoints' request parsers share
- :mod:`.forwarded`: the generation settings forwarded to the model
- :mod:`.errors`: OpenAI's error JSON and the status each error gets
"""
