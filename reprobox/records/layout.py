"""The names of the guest's own folder and record in a run dir: the records' layout, which the guest
writes and the controller reads (guest.settings hands them to the guest's modules).

A leaf without imports: every job process loads it.
"""

GUEST_STATE = ".reprobox"  # hidden folder in the run dir for the guest's own files
GUEST_RESULT = "guest.json"
