"""Notifications: people told, on the channels a workspace declares, that a request waits.

Owns: :mod:`.config` (``[notify]`` and ``[approvals]`` in ``proctor.toml``, parsed strictly),
:mod:`.message` (the ``proctor.notification.v1`` document, its Slack form, its signature;
pure), :mod:`.queue` (the outbox entries a paused request needs: one per channel, and the
deadline's timer) and :mod:`.deliver` (at-least-once delivery from the outbox, audited).

Surface: every module. May import records (the outbox, the audit log), home (the signing
profile's material), boundary (the egress guard) and the shared runtime modules; the engine
calls it when a run pauses and when a command, a worker or the console settles what is due.
"""
