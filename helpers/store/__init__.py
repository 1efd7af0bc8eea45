"""The index file: schema and migrations, backfills, job rows, document and skipped-file rows,
the section/chunk text codec and the connections that open it."""
