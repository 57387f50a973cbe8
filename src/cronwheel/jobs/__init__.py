"""Job operations shared by the REST API, the gRPC API and the CLI (:mod:`.service`): create, edit,
pause, resume, trigger and delete, each one transaction of the store with its audit entry."""
