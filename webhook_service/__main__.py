from webhook_service.cli import main

raise SystemExit(main())
