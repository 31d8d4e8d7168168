"""Search as the teacher of a policy network (expert iteration on top of Deep CFR).

- games.py: the searched agent's self-play games, every decision recorded, as a task
  the traversal executor runs keyed by game ID;
- student.py: the targets a decision teaches, and the student's fit;
- stage.py: the rounds: check the teacher, play its games, train a student, gate it.

Run it with ``python -m lostcities.train +experiment=search_teacher`` (or ``+teacher=
search`` on any Lost Cities run); it follows the run's iterations.
"""
