-- Fragment: a pool row (alias p) with what the candidates statement reads of its unit (alias u), in either branch
-- of recall/candidates' `pooled` that joins the pool.
p.*, {recall/_unit_columns}
