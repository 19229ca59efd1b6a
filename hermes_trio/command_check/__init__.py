"""The dangerous-command check: a shell parser and the rules that say which
commands need a person's yes before the terminal tool runs them.

Sans-IO and self-contained (no trio, no httpx, nothing else of the package):
the tools call :func:`hermes_trio.command_check.policy.find_dangers`;
:mod:`hermes_trio.command_check.policy` holds the rule table.
"""
