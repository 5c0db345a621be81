"""The episode: the tools an agent calls (schemas and their execution in a
sandbox) and the trajectory record of one attempt. Below the agent that runs
episodes, the verifier that replays them and the task makers that use the
tools' output rules; it imports only the sandbox and the record helpers."""
