-- Recall's indexes without a pending list. With GIN's fastupdate (the
-- default) a remember appends its lexemes to a list that every search
-- then reads through, up to gin_pending_list_limit (4 MB) of them, before
-- a vacuum or a full list merges it: over 100,000 memories that list
-- doubled a recall's median. Without it a remember updates the index
-- itself. The list already pending is merged now. Keep in step with
-- ../sqlite/0014_memory_search_direct.sql.
ALTER INDEX memory_search_idx SET (fastupdate = off);
ALTER INDEX memory_tags_idx SET (fastupdate = off);
SELECT gin_clean_pending_list('memory_search_idx'::regclass);
SELECT gin_clean_pending_list('memory_tags_idx'::regclass);
