/* The sleep protocol of fibersched's workers (fibersched.h), for Spin.

   Workers search for work, announce that they may sleep, search again, count themselves
   sleeping and park; publishers of work and posters of ready fibers wake them; the
   drainer of fsched_destroy waits, idle like a worker, until every unit of work has
   ended, then stops the workers.

   The model is sequentially consistent: each atomic block is one memory operation of the
   C code (a load, a store, a read-modify-write, or a CAS loop whose failed attempts only
   reread), followed by the thread's local decisions; blocks interleave in one total
   order. The header argues, at each operation, the C11 orderings that make the code
   behave so: a seq_cst fence between a publication and the read of the counters
   (fsched__new_jobs), and between a sleeper's update of the counters and its last look
   (fsched__sleep); seq_cst loads of the deques' ends in a search.

   Scenarios (spin -D...):
     (default)  FIBER: an outside thread makes a fiber of the last worker ready
                (fsched__make_ready), then spawns job 1 (fsched_spawn: the injector); the
                fiber, resumed, computes until job 1 has run.
     JOBS       an outside thread spawns job 1, then job 2; job 1 computes until job 2
                has run.
     DRAIN      fsched_destroy drains (with one worker) while a plain thread spawns task 2
                and runs a pipeline (its job 1 runs on a slot, the run ends on the plain
                thread), both racing destroy; then the workers are stopped.
   NW worker threads: 2 by default (-DNW=3 for three). ASLEEP: the outside thread starts
   once every worker is parked (the state of an idle scheduler), which keeps three
   workers small.

   A worker that leaves idle passes the search on (fsched__idle_end,
   fsched__pass_search_on): when some slots sleep, no other is idle awake
   (fsched__wants_workers) and work is queued where any slot may take it
   (fsched__work_visible), it announces one job, which wakes a sleeper; a thief does the
   same when it steals. Seeded bugs (a check that cannot fail is no check):
     LOST_WAKE   nobody passes the search on;
     FIBER_ONLY  only a worker that resumes a ready fiber passes it on, and a thief (the
                 rule before jobs were covered): a worker that takes a batch from the
                 injector publishes its rest while still counted idle, then runs the
                 first job for long;
     LOOK_FIRST  the look for queued work comes before the update of the counters that
                 ends idleness (the seq_cst order fsched__work_visible relies on);
     MUTE_END    a run that ends outside the slots does not tell the drainer
                 (fsched__work_ended).

   Checked: when no process can move any more (Spin's timeout), every job has run, and
   in DRAIN destroy has returned and every worker has left. A parked slot moves only
   when unparked, so a job left queued while every slot that could take it sleeps, or a
   drainer asleep for ever, is such a state. */

#ifndef NW
#ifdef DRAIN
#define NW 1
#else
#define NW 2
#endif
#endif
#ifdef DRAIN
#define DRAINER NW           /* the slot of the thread in fsched_destroy */
#define NS (NW + 1)          /* slots */
#else
#define NS NW
#endif

/* fsched__worker.latch */
#define UNSET 0
#define SLEEPY 1
#define PARKED 2             /* FSCHED__LATCH_SLEEPING */
#define SET 3

/* fsched_sched.counters, one atomic word: each block below reads or changes it whole */
byte jec = 1;                /* jobs event counter: odd active, even sleepy */
byte n_sleeping = 0;         /* SLEEPING */
byte n_inactive = 0;         /* INACTIVE */

chan inj = [2] of { byte };  /* the injector; its size is len(inj) */
chan dq[NS] = [2] of { byte }; /* the public part of each slot's deque: one job at most
                                  here, so the ends the owner and thieves use do not
                                  matter */
byte inbox[NS];              /* ready fibers posted to a slot */
byte latch[NS];
bool sleeping[NS];           /* the sleeping flag, taken by one waker */
bool permit[NS];             /* the parker's permit */

bool ran[3];                 /* job i has run */
bool closing = false, terminating = false;
byte begun = 0, ended = 0;   /* units of work, for the drain */
bool drained = false;
byte exited = 0;             /* worker threads that left their loop */

/* fsched__notify: the latch set; a slot that was parking is unparked */
inline notify(w) {
    atomic {
        if
        :: latch[w] == PARKED -> permit[w] = true
        :: else -> skip
        fi;
        latch[w] = SET
    }
}

/* fsched__new_jobs(s, 1), after a publication. The caller declares cj, cs, ci, v, k. */
inline new_jobs() {
    do
    :: atomic {
        /* a seq_cst fence, then the counters read */
        cj = jec; cs = n_sleeping; ci = n_inactive;
        if :: cj % 2 == 1 -> break :: else -> skip fi
       };
       atomic {
        /* fsched__announce_jobs: sleepy made active (a CAS loop) */
        cj = jec; cs = n_sleeping; ci = n_inactive;
        if :: cj % 2 == 0 -> jec++ :: else -> skip fi;
        break
       }
    od;
    /* some slot sleeps and no awake one is idle: fsched__wake_sleepers(s, 1) takes the
       flag of the first sleeper from the cursor (any slot), and tells that slot */
    if
    :: cs > 0 && ci == cs ->
        select(v : 0 .. NS - 1);
        do
        :: atomic {
            if
            :: sleeping[v] -> sleeping[v] = false; k = NS + 1; break
            :: else -> v = (v + 1) % NS; k++; if :: k == NS -> break :: else -> skip fi
            fi
           }
        od;
        atomic {
            if :: k > NS -> notify(v) :: else -> skip fi;
            k = 0; v = 0; cj = 0; cs = 0; ci = 0
        }
    :: else -> cj = 0; cs = 0; ci = 0
    fi
}

/* fsched__work_visible: seq_cst loads of the injector's size and of each slot's public
   deque (into want) */
inline work_visible() {
    atomic { want = len(inj) > 0; v = 0 };
    do
    :: atomic {
        if
        :: want || v == NS -> v = 0; break
        :: else -> want = len(dq[v]) > 0; v++
        fi
       }
    od
}

/* fsched__pass_search_on: some slot sleeps, no other is idle awake (a relaxed load of
   the counters), and work is queued: one job announced, which wakes a sleeper */
inline pass_search_on() {
    atomic { want = n_sleeping != 0 && n_inactive == n_sleeping };
#ifndef FIBER_ONLY
    if :: want -> work_visible() :: else -> skip fi;
#endif
    if :: want -> want = false; new_jobs() :: else -> skip fi
}

/* fsched__idle_end: no longer counted idle (a seq_cst update of the counters), then the
   search passed on (with FIBER_ONLY, `pass` says whether) */
inline idle_end(pass) {
#ifdef LOOK_FIRST
    if :: inactive -> work_visible(); seen = want; want = false :: else -> skip fi;
#endif
    atomic {
        want = inactive;
        if :: inactive -> inactive = false; n_inactive-- :: else -> skip fi
    };
#if defined(LOST_WAKE)
    want = false
#elif defined(FIBER_ONLY)
    if :: want && pass -> pass_search_on() :: else -> want = false fi
#elif defined(LOOK_FIRST)
    if
    :: want ->
        atomic { want = seen && n_sleeping != 0 && n_inactive == n_sleeping; seen = false };
        if :: want -> want = false; new_jobs() :: else -> skip fi
    :: else -> skip
    fi
#else
    if :: want -> pass_search_on() :: else -> skip fi
#endif
}

/* A slot's scheduling loop (fsched__loop_turn): posted fibers, a ready fiber, a job,
   else, when idle, leaving (fsched__root_may_leave: the drainer when
   fsched__quiescent holds, a worker when the scheduler terminates) or an idle step. */
proctype slot(byte me) {
    bool inactive = false, want = false, seen = false;
    byte rounds = 0, myjec = 0, ready = 0, job = 0, rest = 0;
    byte cj = 0, cs = 0, ci = 0, v = 0, k = 0, e = 0;
end_loop:
top:
    /* fsched__collect_posted: the latch consumed, then the inbox emptied */
    atomic { if :: latch[me] == SET -> latch[me] = UNSET :: else -> skip fi };
    atomic {
        ready = ready + inbox[me]; inbox[me] = 0;
        if :: ready > 0 -> ready--; goto resume :: else -> skip fi
    };

    /* fsched__find_job: the own deque, */
    atomic { if :: len(dq[me]) > 0 -> dq[me]?job; goto found :: else -> skip fi };
    /* the injector (fsched__take_injected: a batch, here of 2 at most; the first runs,
       the rest goes to the deque, fsched__publish), */
    atomic {
        if
        :: len(inj) > 0 ->
            inj?job;
            if :: len(inj) > 0 -> inj?rest :: else -> goto found fi
        :: else -> goto steal
        fi
    };
    atomic { dq[me]!rest; rest = 0 };
    new_jobs();
    goto found;
steal:
    /* the other slots (fsched__steal) */
    do
    :: atomic {
        if
        :: v != me && len(dq[v]) > 0 -> dq[v]?job
        :: else -> skip
        fi;
        v++;
        if
        :: job != 0 -> v = 0; break
        :: job == 0 && v == NS -> v = 0; goto idle
        :: else -> skip
        fi
       }
    od;
#ifndef LOST_WAKE
    /* a thief passes the search on (fsched__steal), before it leaves idle */
    pass_search_on();
#endif

found:
    /* fsched__idle_end, then the job runs (fsched__task_execute) */
    idle_end(false);
    atomic {
#ifdef JOBS
        (job != 1 || ran[2]);                          /* job 1 computes until job 2 ran */
#endif
        ran[job] = true;
#ifdef DRAIN
        if :: job == 2 -> ended++ :: else -> skip fi;  /* a task: its end counted here;
                                                          job 1's run ends on its thread */
#endif
        job = 0;
        goto top
    };

resume:
    /* a ready fiber: fsched__idle_end, then the fiber runs (fsched__run_fiber) */
    idle_end(true);
    atomic { ran[1] -> goto top };                     /* it computes until job 1 ran */

idle:
#ifdef DRAIN
    if
    :: me == DRAINER ->
        /* fsched__quiescent: ends read before beginnings, then the injector */
        atomic { e = ended };
        atomic { want = e == begun; e = 0 };
        if :: want -> atomic { want = len(inj) == 0 } :: else -> skip fi
    :: else -> atomic { want = terminating }
    fi;
    if :: want -> want = false; goto leave :: else -> skip fi;
#endif
    /* fsched__idle_step: fsched__idle_begin, counted inactive ... */
    atomic {
        if
        :: !inactive -> inactive = true; rounds = 0; n_inactive++
        :: else -> goto round
        fi
    };
#ifdef DRAIN
    /* ... and, destroy begun, the drainer told (the last unit may have ended here) */
    atomic { want = closing && me != DRAINER };
    if :: want -> want = false; notify(DRAINER) :: else -> skip fi;
#endif
round:
    /* The header spins rounds 1 to 9, announces sleepiness at 10, yields at 11 and
       sleeps from 12 on. Here the announcement comes at 1 (earlier rounds only search),
       and two more turns search (the loop searches before every step) before the sleep
       at 3. */
    atomic {
        rounds++;
        if
        :: rounds == 1 ->                              /* fsched__announce_sleepy */
            if :: jec % 2 == 1 -> jec++ :: else -> skip fi;
            myjec = jec;
            goto top
        :: rounds == 2 -> goto top
        :: else -> skip
        fi
    };

    /* fsched__sleep: gives up when something was posted (the latch is SET) */
    atomic {
        if
        :: latch[me] == UNSET -> latch[me] = SLEEPY
        :: else -> rounds = 2; goto top                /* sleeps again next turn */
        fi
    };
    atomic { sleeping[me] = true };
    /* counted sleeping unless work was announced since the announcement of sleepiness
       (a CAS loop on the counters) */
    atomic { if :: jec == myjec -> n_sleeping++ :: else -> goto undo fi };
    /* a seq_cst fence; the last look: the injector, the inbox, then the latch */
    atomic { if :: len(inj) > 0 -> goto no_park :: else -> skip fi };
    atomic { if :: inbox[me] > 0 -> goto no_park :: else -> skip fi };
    atomic { if :: latch[me] == SLEEPY -> latch[me] = PARKED :: else -> goto no_park fi };
end_parked:
    atomic { permit[me] -> permit[me] = false };       /* fsched__park */
    atomic { if :: latch[me] == PARKED -> latch[me] = UNSET :: else -> skip fi; goto uncount };
no_park:
    atomic { if :: latch[me] == SLEEPY -> latch[me] = UNSET :: else -> skip fi };
uncount:
    atomic { sleeping[me] = false };                   /* a CAS 1 -> 0 */
    atomic { n_sleeping--; rounds = 0; myjec = 0; goto top };
undo:
    atomic { sleeping[me] = false };
    atomic {
        if :: latch[me] == SLEEPY -> latch[me] = UNSET :: else -> skip fi;
        rounds = 0; myjec = 0;
        goto top
    };

#ifdef DRAIN
leave:
    idle_end(false);
    if
    :: me == DRAINER ->
        /* fsched__stop_workers: terminating, every worker told, joined */
        terminating = true;
        do
        :: v < NW -> notify(v); v++
        :: else -> v = 0; break
        od;
        (exited == NW);
        drained = true
    :: else -> exited++
    fi
#endif
}

#ifndef DRAIN
/* the thread outside the scheduler */
active proctype outside() {
    byte cj = 0, cs = 0, ci = 0, v = 0, k = 0, j = 1;
#ifdef ASLEEP
    byte i = 0;
    do
    :: i < NW -> (latch[i] == PARKED); i++
    :: else -> break
    od;
#endif
#ifndef JOBS
    /* fsched__make_ready from another thread: the fiber posted, then its worker told */
    atomic { inbox[NW - 1]++ };
    notify(NW - 1);
#endif
    /* fsched_spawn: queued, then announced */
    do
    :: inj!j;
       new_jobs();
#ifdef JOBS
       if :: j == 1 -> j++ :: else -> break fi
#else
       break
#endif
    od
}
#else
/* a plain thread: fsched_spawn of task 2, then a run (a pipeline run) whose job is job
   1; each begins unless destroy has begun (the registry's lock orders them); the run's
   end is counted on this thread (fsched__work_ended) */
active proctype outside() {
    byte cj = 0, cs = 0, ci = 0, v = 0, k = 0, j = 2;
    bool cl = false;
    do
    :: atomic { cl = closing; if :: !cl -> begun++ :: else -> ran[j] = true fi };
       if
       :: !cl -> inj!j; new_jobs()
       :: else -> skip
       fi;
       if :: j == 2 -> j = 1 :: else -> break fi
    od;
    if
    :: !cl ->
        (ran[1]);
        atomic { ended++ };
        atomic { cl = closing };
#ifndef MUTE_END
        if :: cl -> notify(DRAINER) :: else -> skip fi
#endif
    :: else -> skip
    fi
}

/* fsched_destroy: closing (the drainer published with it), then the drainer's loop */
active proctype destroy() {
    closing = true;
    run slot(DRAINER)
}
#endif

init {
    byte i = 0;
    atomic {
        do
        :: i < NW -> run slot(i); i++
        :: else -> break
        od
    }
}

/* When nothing can move any more: every job ran, and a drain finished with every worker
   gone. */
active proctype monitor() {
    timeout ->
        assert(ran[1]);
#ifdef JOBS
        assert(ran[2]);
#endif
#ifdef DRAIN
        assert(ran[2] && drained && exited == NW)
#else
        skip
#endif
}
