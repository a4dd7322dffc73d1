-- sagaway_notify(): the test for an execution that has just ended.
    IF NEW.status IN ('COMPLETED', 'FAILED', 'CANCELLED', 'TERMINATED') THEN
        IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
