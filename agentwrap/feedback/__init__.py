"""Feedback sources: checks that run when files change or an agent edits, and
whose results reach the agent as environment information (issue 12).

The modules, each with one job:

* :mod:`.presets` and :mod:`.sources`: what a ``[[feedback]]`` / ``[[schedule]]``
  table means, presets by name, and which of them may run (a project's tables
  only with the person's trust);
* :mod:`.runner`: one command run, without a shell, bounded in time and output;
  :class:`~.runner.SourceWorker` never runs one source twice at once;
* :mod:`.trimming`: the useful part of a failure;
* :mod:`.results`: what was last said per source (identical results are not
  sent twice, a recovery is said once), kept on disk because every hook run is
  a new process;
* :mod:`.batching`: one message per turn for all sources, within a budget;
* :mod:`.emit`: the message, enqueued through :class:`~agentwrap.service.Service`
  and audited with its provenance;
* :mod:`.watcher`: a watchdog observer, ignore rules and burst debouncing;
* :mod:`.edit_hook`: what the between-tool-calls hook runs after an edit tool;
* :mod:`.companion`: a session's watchers and schedules in the supervisor host;
* :mod:`.scheduler`: sources run every N seconds.
"""
