"""The evaluation server (`vbench-async serve`): one kept engine, evaluation jobs over HTTP, ordinary run directories.

    jobs.py     what a job asks for (JobSpec) and what the server reports back (Job)
    engine.py   the kept backend on its own event loop, handed to each run (EngineKeeper)
    server.py   the job queue, run one job at a time by the runner (EvalServer)
    api.py      the HTTP endpoints, token check and binding rules (standard library http.server)
    client.py   submit, poll, cancel and wait (standard library urllib): `run --server`, a training loop

Imports stay inside the modules: the client must not load the runner.
"""
