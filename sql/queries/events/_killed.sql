-- Fragment: whether the kill switch is on, as an SQL expression (memory does nothing at all while it is).
coalesce((SELECT ks.value = 'on' FROM memory_switch ks WHERE ks.scope = 'kill' AND ks.key = ''), false)
