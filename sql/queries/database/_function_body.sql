-- Fragment: a digest of the public function's body as the server holds it (every overload's, in creation order).
(SELECT md5(string_agg(p.prosrc, '' ORDER BY p.oid)) FROM pg_proc p
 WHERE p.proname = %(function)s AND p.pronamespace = 'public'::regnamespace)
