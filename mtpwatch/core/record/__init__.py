"""Recordings: one compressed file per session, written as it goes and read back for replay.

Owns the file format (`schema`: version, record kinds, the page filter and line deltas), the
writer (`writer.Recorder`: gzip, flushed at least once a second, secrets scrubbed) and the reader
(`reader.read_recording`: tolerates a file cut off by a crash). It knows nothing of the UI: the
app's feed calls the recorder through small hooks, and the replay source feeds the records back
into the same core code (`core.metrics.rates.Collector`, `core.http.generation.GenerationStats`).

May import: the standard library, `mtpwatch.core.metrics` and `mtpwatch.core.http.generation`. The
format is documented in docs/recording.md."""
