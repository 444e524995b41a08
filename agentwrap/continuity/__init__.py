"""Continuity: a handoff record per project, kept while a session runs, and
delivered to the next session started there (issue 12).

* :mod:`.record`: the record (data only);
* :mod:`.store`: where records live (per project, atomic, 0600, bounded);
* :mod:`.collect`: keeping a running session's record current (supervisor);
* :mod:`.hooks`: what the agent's hooks add, and the session-start handoff;
* :mod:`.render`: the bounded, hostile-content-safe startup context;
* :mod:`.launch`: at ``agentwrap run``: prepare the handoff, begin the record.
"""
