-- Forgetting a unit also deletes, in the same transaction, the context-aware vectors that embed it: those of the
-- turns after it that may read it as their previous turn (a text version c<n>, vocabulary.CONTEXT_TEXT_VERSIONS,
-- reads at most EMBED_CONTEXT_SCAN = 8 unit numbers back). The next embedding run re-embeds those turns without it.
CREATE OR REPLACE FUNCTION memory_units_forget_vectors() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF NEW.status = 'forgotten' AND OLD.status IS DISTINCT FROM 'forgotten' THEN
        DELETE FROM memory_embeddings WHERE unit_id = NEW.id;
        DELETE FROM memory_embeddings e USING memory_units u
        WHERE u.project = NEW.project AND u.number BETWEEN NEW.number + 1 AND NEW.number + 8
          AND e.unit_id = u.id AND e.model_key ~ '-c[0-9]+$';
    END IF;
    RETURN NEW;
END $$;
