-- Live units whose private_to (what recall filters on) disagrees with their sources. Only units with a private
-- source or a non-NULL private_to can disagree, so both partial indexes bound the scan.
SELECT id::text
FROM memory_units
WHERE status IN {live_statuses}
  AND (private_to IS NOT NULL
       OR id IN (SELECT unit_id FROM memory_sources WHERE visibility = {visibility_private}))
  AND private_to IS DISTINCT FROM memory_unit_audience(id);
