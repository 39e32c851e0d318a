/* The sleep protocol of fibersched's workers, for Spin.

   Workers search for work, announce that they may sleep, search again, count themselves
   sleeping and park; publishers of work and posters of ready fibers wake them; the
   drainer of fsched_destroy waits, asleep like a worker, until every unit of work has
   ended. Each atomic block below is one memory operation of the C code (the model is
   sequentially consistent: the header argues the C11 orderings that make it so, a seq_cst
   fence between a publication and the read of the counters, and between a sleeper's
   update of the counters and its last look).

   Scenarios (spin -D...):
     (default)   WAKE: an outside thread posts a ready fiber to worker 1 and then queues a
                 job; the fiber computes until the job has run (the worker that resumes it
                 is busy until then). A job must never wait while every worker that could
                 take it sleeps.
     DRAIN       fsched_destroy drains while a plain thread's run ends: the drainer must
                 finish.
   Seeded bugs (a check that cannot fail is no check):
     LOST_WAKE     a worker that resumes a fiber does not pass the search on
                   (fsched__pass_search_on): the job's wake can be taken by a worker that
                   then runs the fiber, and the job waits for ever.
     MUTE_END      a run that ends outside the workers does not tell the drainer
                   (fsched__work_ended): fsched_destroy sleeps for ever. */

#ifndef DRAIN
#define NW 2                 /* worker threads */
#else
#define NW 1                 /* (one worker is enough for the drain, and keeps it small) */
#endif
#define DRAINER NW           /* the slot of the thread in fsched_destroy */
#define NS (NW + 1)          /* slots */

#define UNSET 0
#define SLEEPY 1
#define PARKED 2             /* the latch's SLEEPING */
#define SET 3

/* the counters word (fsched_sched.counters): one value, changed only as a whole */
byte jec = 1;                /* jobs event counter: odd active, even sleepy */
byte n_sleeping = 0;
byte n_inactive = 0;

byte injector = 0;           /* jobs queued from outside */
byte inbox[NS];              /* ready fibers posted to a slot */
byte latch[NS];
bool sleeping[NS];           /* the sleeping flag a waker takes */
bool permit[NS];             /* the parker's permit */
bool closing = false;
byte begun = 0, ended = 0;   /* units of work, for the drain */
bool job_ran = false;
bool drained = false;

/* fsched__notify: sets the latch, unparks a parked slot */
inline notify(v) {
    atomic {
        if
        :: latch[v] == PARKED -> permit[v] = true
        :: else -> skip
        fi;
        latch[v] = SET
    }
}

/* fsched__wake_sleepers(s, 1): from a cursor (any start), the first slot whose flag it
   takes is told */
inline wake_one_sleeper() {
    byte k = 0, v;
    bool took = false;
    if
    :: v = 0
    :: v = NW - 1
    :: v = DRAINER
    fi;
    do
    :: k < NS && !took ->
        atomic {
            if
            :: sleeping[v] -> sleeping[v] = false; took = true
            :: else -> skip
            fi
        };
        if
        :: took -> notify(v)
        :: else -> skip
        fi;
        v = (v + 1) % NS;
        k++
    :: else -> break
    od
}

/* fsched__new_jobs(s, 1), after the publication: reads the counters; a sleepy counter is
   made active; a sleeper is woken when no awake worker is idle */
inline new_jobs() {
    byte cj, cs, ci;
    bool done = false;
    atomic { cj = jec; cs = n_sleeping; ci = n_inactive };
    do
    :: cj % 2 == 0 && !done ->
        atomic {
            if
            :: jec == cj && n_sleeping == cs && n_inactive == ci -> jec = cj + 1; done = true
            :: else -> cj = jec; cs = n_sleeping; ci = n_inactive
            fi
        }
    :: else -> break
    od;
    if
    :: cs > 0 && ci - cs < 1 -> wake_one_sleeper()
    :: else -> skip
    fi
}

/* fsched__pass_search_on: a worker that stops searching while others sleep and nobody
   else searches wakes one more */
inline pass_search_on() {
    bool want;
    atomic { want = n_sleeping != 0 && n_inactive == n_sleeping };
    if
    :: want -> new_jobs()
    :: else -> skip
    fi
}

/* fsched__sleep: gives up when something was posted (latch), or work was announced
   since the announcement of sleepiness (the jobs event counter moved); else counts
   itself sleeping, looks at the injector and its inbox a last time, parks */
inline sleep_now(me, myjec) {
    bool ok, park;
    atomic {
        ok = latch[me] == UNSET;
        if
        :: ok -> latch[me] = SLEEPY
        :: else -> skip
        fi
    };
    if
    :: ok ->
        sleeping[me] = true;
        atomic {
            ok = jec == myjec;
            if
            :: ok -> n_sleeping++
            :: else -> skip
            fi
        };
        if
        :: !ok ->
            sleeping[me] = false;
            atomic { if :: latch[me] == SLEEPY -> latch[me] = UNSET :: else -> skip fi }
        :: else ->
            atomic {
                park = injector == 0 && inbox[me] == 0 && latch[me] == SLEEPY;
                if
                :: park -> latch[me] = PARKED
                :: else ->
                    if :: latch[me] == SLEEPY -> latch[me] = UNSET :: else -> skip fi
                fi
            };
            if
            :: park ->
end_parked:     atomic { permit[me] -> permit[me] = false };
                atomic { if :: latch[me] == PARKED -> latch[me] = UNSET :: else -> skip fi }
            :: else -> skip
            fi;
            sleeping[me] = false;
            atomic { n_sleeping-- }
        fi
    :: else -> skip
    fi
}

/* fsched__idle_begin: counted inactive; once destroy has begun, tells the drainer (the
   last unit may have ended here) */
inline idle_begin(me, inactive, rounds) {
    bool cl;
    if
    :: !inactive ->
        inactive = true;
        rounds = 0;
        atomic { n_inactive++; cl = closing };
        if
        :: cl && me != DRAINER -> notify(DRAINER)
        :: else -> skip
        fi
    :: else -> skip
    fi
}

inline idle_end(inactive) {
    if
    :: inactive -> inactive = false; atomic { n_inactive-- }
    :: else -> skip
    fi
}

/* fsched__idle_step: a few rounds of searching, the announcement, two more searches
   (the loop searches before every step), then sleep */
inline idle_step(me, inactive, rounds, myjec) {
    idle_begin(me, inactive, rounds);
    rounds++;
    if
    :: rounds == 1 ->
        atomic {
            if :: jec % 2 == 1 -> jec++ :: else -> skip fi;
            myjec = jec
        }
    :: rounds == 2 -> skip
    :: rounds >= 3 -> sleep_now(me, myjec); rounds = 0
    fi
}

/* Runs the job. In WAKE it is a spawned task, a unit of work of its own (its end is
   counted where it runs); in DRAIN it belongs to the plain thread's run, whose end that
   thread counts. */
inline run_job() {
#ifndef DRAIN
    atomic { job_ran = true; ended++ }
#else
    job_ran = true
#endif
}

/* A worker thread's loop (fsched__loop_turn): posted fibers, the ready fiber, jobs, idle */
proctype worker(byte me) {
    bool inactive = false, got;
    byte rounds = 0, myjec = 0, ready = 0;
end_loop:
    do
    :: true ->
        atomic {
            if :: latch[me] == SET -> latch[me] = UNSET :: else -> skip fi
        };
        atomic { ready = ready + inbox[me]; inbox[me] = 0 };
        if
        :: ready > 0 ->
            ready--;
            if
            :: inactive ->
                idle_end(inactive);
#ifndef LOST_WAKE
                pass_search_on();
#endif
                skip
            :: else -> skip
            fi;
            /* the fiber computes until the job has run */
            (job_ran)
        :: else ->
            atomic {
                got = injector > 0;
                if :: got -> injector-- :: else -> skip fi
            };
            if
            :: got ->
                idle_end(inactive);
                run_job()
            :: else ->
                idle_step(me, inactive, rounds, myjec)
            fi
        fi
    od
}

#ifndef DRAIN
/* WAKE: a fiber made ready on worker 1 from outside (fsched__make_ready: posted, then
   the worker is told), then a job queued from outside (fsched_spawn) */
active proctype outside() {
    atomic { inbox[NW - 1]++ };
    notify(NW - 1);
    atomic { injector++; begun++ };
    new_jobs()
}
#else
/* DRAIN: a plain thread's run (a pipeline run) begun before destroy; its last job runs
   on a worker; the run's end is counted on the plain thread (fsched__work_ended) */
active proctype runner() {
    bool cl;
    atomic { begun++ };
    atomic { injector++ };
    new_jobs();
    (job_ran);
    atomic { ended++; cl = closing };
#ifndef MUTE_END
    if
    :: cl -> notify(DRAINER)
    :: else -> skip
    fi
#endif
}

/* fsched_destroy's slot: closing, then the loop with fsched__quiescent as its end (it
   also runs jobs and sleeps like any slot) */
active proctype drainer() {
    bool inactive = false, got, quiet;
    byte rounds = 0, myjec = 0;
    closing = true;
    do
    :: true ->
        atomic {
            if :: latch[DRAINER] == SET -> latch[DRAINER] = UNSET :: else -> skip fi
        };
        atomic {
            got = injector > 0;
            if :: got -> injector-- :: else -> skip fi
        };
        if
        :: got ->
            idle_end(inactive);
            run_job()
        :: else ->
            /* fsched__quiescent */
            atomic { quiet = ended == begun && injector == 0 };
            if
            :: quiet -> break
            :: else -> idle_step(DRAINER, inactive, rounds, myjec)
            fi
        fi
    od;
    drained = true
}
#endif

init {
    atomic {
        run worker(0);
#if NW > 1
        run worker(1)
#endif
    }
}

/* When nothing can move any more: no job is left queued, the fiber's worker is not stuck
   behind a job nobody took, and a drain has finished. */
active proctype monitor() {
    timeout ->
        assert(injector == 0 && job_ran);
#ifdef DRAIN
        assert(drained)
#endif
}
