-- Decay scores of every unit live at the day's end (%(t)s), computed only from facts dated before it (each task's
-- latest vote then, the status then), so re-materialising a day gives identical rows.
WITH ev AS (
    SELECT unit_id,
           sum(CASE kind WHEN 'read' THEN %(w_read)s::double precision WHEN 'cited' THEN %(w_cited)s::double precision
                         WHEN 'followed' THEN %(w_followed)s::double precision ELSE 0 END
               * power(0.5, extract(epoch FROM (%(t)s - at)) / 86400.0 / %(activation_half_life)s)) AS activation,
           max(at) FILTER (WHERE kind IN ('read', 'cited', 'followed')) AS last_used
    FROM memory_events WHERE at < %(t)s GROUP BY unit_id
), votes_then AS (
    SELECT DISTINCT ON (unit_id, task_id) unit_id, vote, at
    FROM memory_vote_history WHERE at < %(t)s
    ORDER BY unit_id, task_id, seq DESC
), votes AS (
    SELECT unit_id, count(*) FILTER (WHERE vote = 1) AS confirms, count(*) FILTER (WHERE vote = -1) AS flags,
           max(at) FILTER (WHERE vote = 1) AS last_confirmed
    FROM votes_then GROUP BY unit_id
), base AS (
    SELECT u.id, u.project, u.type,
           greatest(u.valid_from, coalesce(ev.last_used, u.valid_from)) AS last_activity,
           coalesce(ev.activation, 0) AS activation,
           (coalesce(v.confirms, 0) + %(prior_weight)s::double precision * %(default_trust)s::double precision)
               / (coalesce(v.confirms, 0) + coalesce(v.flags, 0) + %(prior_weight)s) AS trust,
           CASE WHEN v.last_confirmed IS NULL THEN %(grace)s::numeric
                ELSE %(grace_confirmed)s::numeric END AS grace_days,
           extract(epoch FROM (%(t)s - coalesce(v.last_confirmed, u.created_at))) / 86400.0 AS unconfirmed_days
    FROM ({decay/_units_live_at}) u
    LEFT JOIN ev ON ev.unit_id = u.id
    LEFT JOIN votes v ON v.unit_id = u.id
), scored AS (
    SELECT id, project, type, activation,
           power(0.5, greatest(0, extract(epoch FROM (%(t)s - last_activity))) / 86400.0 / %(half_life)s) AS recency,
           CASE WHEN unconfirmed_days <= grace_days OR trust <= %(floor)s THEN trust
                ELSE %(floor)s + (trust - %(floor)s) * power(0.5, (unconfirmed_days - grace_days) / %(trust_half_life)s)
           END AS trust,
           type = 'episodic' AND last_activity + make_interval(days => %(ttl)s) <= %(t)s AS expired,
           last_activity
    FROM base
)
INSERT INTO decay_scores (day, unit_id, project, recency, activation, trust, expired, stale, score)
SELECT %(day)s::date, id, project, recency, activation, trust, expired, trust < %(stale_below)s,
       0.5 * recency + 0.3 * (1 - exp(-activation)) + 0.2 * trust
FROM scored;
