import asyncio, os, threading
from switchboard_client import Client, TaskContext, Worker

worker = Worker(os.environ["SB"], os.environ["CODER_TOKEN"])  # the coder: a function

@worker.on_task
async def count_words(task: TaskContext) -> dict[str, int]:
    await task.progress({"step": "counting"})
    return {"words": len(task.description.split())}

threading.Thread(target=asyncio.run, args=(worker.serve(),), daemon=True).start()

# The planner: submits a task and waits for its result, pushed live.
with Client(os.environ["SB"], token=os.environ["PLANNER_TOKEN"]) as planner:
    sent = planner.submit_task(originating_agent_id="planner", target_agent_id="coder",
                               description="to be or not to be")
    for frame in planner.listen():
        if frame.type == "TaskResponse" and frame.data["task_id"] == sent.task_response.task_id:
            if frame.data["status"] == "success":
                print("the coder says:", frame.data["result_data"]); break
