-- Record one cluster of a week's consolidation: the unit it became and its member episodes.
INSERT INTO consolidation_clusters (week_start, project, cluster, consolidated_unit, members)
VALUES (%(week_start)s, %(project)s, %(cluster)s, %(unit_id)s, %(members)s);
