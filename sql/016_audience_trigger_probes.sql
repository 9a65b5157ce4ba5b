-- The audience trigger (007_visibility.sql) widens only units that are still private, among those a statement added
-- sources to. Its join to the added rows was planned without knowing how many there are, and for one added source
-- it read every unit of the store: remember() slowed with the store's size (the trigger took 5.9 ms of a 6.2 ms
-- link_inbox at 20k units). Now it probes 007's index of the private units (memory_units_private) by the added
-- units' ids. Only the UPDATE's WHERE changes; CREATE OR REPLACE restates the whole body, since an applied 007 never
-- runs again.
CREATE OR REPLACE FUNCTION memory_sources_audience() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_units u
    SET private_to = CASE WHEN a.shared THEN NULL
                          ELSE ARRAY(SELECT DISTINCT p FROM unnest(u.private_to || a.personas) AS p ORDER BY p) END
    FROM (SELECT unit_id, bool_or(visibility = 'project') AS shared,
                 coalesce(array_agg(persona) FILTER (WHERE visibility = 'private' AND persona IS NOT NULL), '{}')
                     AS personas
          FROM added GROUP BY unit_id) AS a
    WHERE u.id = ANY (ARRAY(SELECT DISTINCT unit_id FROM added)) AND u.private_to IS NOT NULL
      AND u.id = a.unit_id;
    RETURN NULL;
END $$;
