"""A scripted OpenAI-compatible model, reachable two ways: a real HTTP/1.1
server on a loopback socket (``server.py``) and an in-process httpx
transport (``double.py``). Both answer from the same script through the
same plan and renderers, so they send the same bytes at the same times.

- ``model.py``: the script, the records, planning each answer
- ``plan.py``: one response decided up front
- ``turns.py``: what a step says, its ids and usage
- ``chat_render.py`` / ``responses_render.py``: the two wire formats
- ``records.py``: what the model saw

The public names are exported from :mod:`hermes_trio.testing`.
"""
