-- Fragment: a source (alias s) its reader may see: project-visible, or the reader's own private one.
(s.visibility = {visibility_project} OR s.persona = %(reader)s::text)
