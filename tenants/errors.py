class InvalidTransition(Exception):
    """A state change that the object's current state does not allow (e.g. approving a
    cancelled request). Shown to users as it is, so the message must read well."""

    def __init__(self, message: str, *, current_state: str):
        super().__init__(message)
        self.current_state = current_state
