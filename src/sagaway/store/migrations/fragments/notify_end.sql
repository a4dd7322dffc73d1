-- The end of sagaway_notify() (schema v3 on): the last branch closed, no row returned.
    END IF;
    RETURN NULL;
END
$$;
