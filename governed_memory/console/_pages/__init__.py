"""The console's pages, one module each: requests, subjects, retention, audit, health.

Each module exposes ``routes`` (its Starlette routes). A page checks the
role first (``_auth.require``), reads through the public API off the event
loop, audits a view of personal data before showing it (``_views.audit_view``)
and passes every action's actor (the signed-in user's ``Principal.actor``)
to the library call that records it.
"""
