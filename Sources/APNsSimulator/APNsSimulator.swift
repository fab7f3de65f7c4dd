// APNsSimulator: see README "Development" for what lives here.
