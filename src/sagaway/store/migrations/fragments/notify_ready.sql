-- sagaway_notify() from schema v5: an execution no one owns can become due ('ready:', no time).
    -- use: notify_ready_when
        PERFORM pg_notify(channel, 'ready:');
